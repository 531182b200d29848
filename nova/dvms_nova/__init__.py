"""dvms_nova: dvms as a plugin of Nova's scheduler.

``dvms_nova.weigher.DvmsWeigher`` asks ``dvms scheduler-api`` to order the
candidate hosts by the demand the dvms agents measure, and falls back to
neutral weights (Nova's own order) on any error. See
doc/source/admin/scheduler-api.rst.
"""

# The package version; devstack/pkg/build-deb.sh writes the build's into
# the copy it packages.
__version__ = '0.0.0'
