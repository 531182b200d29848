"""Makes the harness's fake virt driver importable as nova.virt.dvms_fake.

Nova loads compute drivers only from the nova.virt package. This file is on
the PYTHONPATH of the harness's nova-compute processes only (up.sh copies it
to $DVMS_FUNC_DIR/python), so nothing under /usr is changed. The finder is
lazy: nova is not imported until nova-compute asks for the driver.
It shadows Debian's /etc/python3.11/sitecustomize.py, which only installs
the apport crash hook (absent here).
"""
import importlib.abc
import importlib.util
import os
import sys

_NAME = "nova.virt.dvms_fake"
_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dvms_fake_driver.py")


class _DvmsFakeFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _NAME:
            return None
        return importlib.util.spec_from_file_location(fullname, _FILE)


sys.meta_path.insert(0, _DvmsFakeFinder())
