"""A fake virt driver whose capacity comes from the environment.

nova.virt.fake.FakeDriver reports 1000 vCPU / 800 GB RAM per host, too much
for a scheduler to reason about. This subclass of FakeLiveMigrateDriver
(fake guests, live migration supported) reports the capacity set by
DVMS_FAKE_VCPUS, DVMS_FAKE_MEMORY_MB and DVMS_FAKE_LOCAL_GB.
Loaded by nova-compute as compute_driver = dvms_fake.DvmsFakeDriver.
"""
import os

from nova.virt import fake


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


class DvmsFakeDriver(fake.FakeLiveMigrateDriver):
    def __init__(self, virtapi, read_only=False):
        # FakeDriver.__init__ reads these attributes to build its resources.
        self.vcpus = _env_int("DVMS_FAKE_VCPUS", 8)
        self.memory_mb = _env_int("DVMS_FAKE_MEMORY_MB", 16384)
        self.local_gb = _env_int("DVMS_FAKE_LOCAL_GB", 100)
        super().__init__(virtapi, read_only)
