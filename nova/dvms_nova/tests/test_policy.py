"""Unit tests of dvms_nova.policy against the installed Nova's rules,
enforced by oslo.policy as nova-api does (same command as test_weigher).
"""

import os
import tempfile
import unittest

from nova import policies
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from dvms_nova import policy


def enforcer(path):
    conf = cfg.ConfigOpts()
    conf([], project="dvms-test")
    e = oslo_policy.Enforcer(conf, policy_file=path)
    e.register_defaults(policies.list_rules())
    e.load_rules()
    return e


class PolicyTest(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            for name, check in policy.rules(policies.list_rules(), "dvms"):
                f.write('"%s": "%s"\n' % (name, check))
        self.e = enforcer(self.path)
        # Nova sets is_admin from context_is_admin: the role dvms makes an
        # admin context (cross-project database access).
        self.agent = {"roles": ["dvms"], "project_id": "p-dvms", "user_id": "u-dvms"}
        self.agent["is_admin"] = self.e.enforce("context_is_admin", {}, self.agent)
        self.admin = {"roles": ["admin"], "project_id": "p-admin", "user_id": "u-admin", "is_admin": True}
        self.owner = {"roles": ["member"], "project_id": "p-other", "user_id": "u-other", "is_admin": False}
        self.target = {"project_id": "p-other", "user_id": "u-other"}

    def tearDown(self):
        os.unlink(self.path)

    def allowed(self, rule, creds):
        return self.e.enforce(rule, self.target, creds)

    def test_agent_context_is_admin(self):
        self.assertTrue(self.agent["is_admin"])

    def test_agent_gets_what_it_calls(self):
        for rule in policy.GRANTED:
            self.assertTrue(self.allowed(rule, self.agent), rule)

    def test_agent_gets_nothing_else(self):
        # Every other rule of Nova is refused to the agent on another
        # project's resources, although its context is admin.
        allowed = [r.name for r in policies.list_rules()
                   if r.name not in policy.GRANTED and r.name != "context_is_admin"
                   and r.check_str not in ("@",) and self.allowed(r.name, self.agent)]
        self.assertEqual([], allowed)

    def test_some_refusals_by_name(self):
        for rule in ("os_compute_api:servers:delete", "os_compute_api:servers:create",
                     "os_compute_api:os-services:update", "os_compute_api:os-hypervisors:list",
                     "os_compute_api:os-aggregates:index", "os_compute_api:os-flavor-manage:create",
                     "os_compute_api:servers:resize", "os_compute_api:servers:revert_resize",
                     "os_compute_api:os-evacuate"):
            self.assertFalse(self.allowed(rule, self.agent), rule)
        # A drain's cold migration (maintenance action cold_migrate) and
        # its confirmation are the agent's, a resize is not.
        for rule in ("os_compute_api:os-migrate-server:migrate", "os_compute_api:servers:confirm_resize"):
            self.assertTrue(self.allowed(rule, self.agent), rule)

    def test_admins_and_owners_keep_their_rights(self):
        for r in policies.list_rules():
            self.assertTrue(self.allowed(r.name, self.admin) or r.check_str == "!", r.name)
        for rule in ("os_compute_api:servers:delete", "os_compute_api:servers:show",
                     "os_compute_api:os-shelve:shelve"):
            self.assertTrue(self.allowed(rule, self.owner), rule)
        for rule in ("os_compute_api:os-migrate-server:migrate_live", "os_compute_api:os-hypervisors:list"):
            self.assertFalse(self.allowed(rule, self.owner), rule)

    def test_missing_rule_is_an_error(self):
        with self.assertRaises(SystemExit):
            policy.rules([r for r in policies.list_rules()
                          if r.name != "os_compute_api:os-migrate-server:migrate_live"], "dvms")


if __name__ == "__main__":
    unittest.main()
