# Sphinx configuration of the dvms documentation.
#
# A stock theme and no extension beyond Sphinx itself, so the docs build
# wherever Sphinx is installed (Debian: apt-get install python3-sphinx):
#
#     sphinx-build -W -b html doc/source doc/build/html
#
# The .rst files are meant to be read as plain files too.

project = 'dvms'
author = 'dvms contributors'
copyright = 'dvms contributors'

master_doc = 'index'
source_suffix = {'.rst': 'restructuredtext'}
exclude_patterns = ['_build']
extensions = []

# Literal blocks are shell sessions, INI files and logs; no highlighting
# language is guessed for them.
highlight_language = 'none'

try:
    import alabaster  # noqa: F401  (Debian's python3-sphinx depends on it)
    html_theme = 'alabaster'
except ImportError:
    html_theme = 'classic'

html_static_path = []
html_title = 'dvms documentation'
