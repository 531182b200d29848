"""Nova policy for the dvms agents' role: no admin role needed.

    python3 -m dvms_nova.policy [--role dvms] [--new-defaults] > /etc/nova/policy.d/dvms.yaml

Run it with the Python of the installed Nova (the rules are that release's).

Why a generated file rather than a few rules: Nova serves another
project's server only to an *admin context* (``context.is_admin``, which
``context_is_admin`` decides: without it the database queries of
``GET /servers/{id}`` and of every server action are limited to the
caller's own project, whatever the policy rule says, and
``os-server-groups?all_projects`` silently lists the caller's groups only).
An agent live-migrates servers of every project, so its role must make
the context admin. This policy does that, and takes back everything else
an admin context would get from the API rules:

- ``context_is_admin`` is ``role:admin or role:ROLE``;
- every other rule of the installed Nova is written out with its default
  (OR'd with its deprecated default, as oslo.policy does unless
  ``[oslo_policy] enforce_new_defaults``; ``--new-defaults`` leaves the
  deprecated ones out), with ``rule:context_is_admin`` and ``is_admin:True``
  replaced by ``role:admin``, so the role passes none of them;
- the rules an agent calls (GRANTED) get ``or role:ROLE``.

What the role still gets from the admin context besides these rules:
servers of every project are visible to its reads, listing deleted
servers, private flavors in the flavor list, and Nova lets an admin
context act on a locked server (dvms does not lock or unlock servers).
"""
import argparse
import sys

# The rules `dvms agent` calls (nova/openstack in the dvms tree).
GRANTED = (
    # Its host's servers: GET /servers/detail?all_tenants&host=H, with the
    # host attribute and the flavor's extra specs (dvms:pin, dvms:priority).
    "os_compute_api:servers:detail",
    "os_compute_api:servers:detail:get_all_tenants",
    "os_compute_api:servers:allow_all_filters",
    "os_compute_api:servers:show",
    "os_compute_api:servers:show:flavor-extra-specs",
    "os_compute_api:os-extended-server-attributes",
    # Server groups of every project (anti-affinity in plans).
    "os_compute_api:os-server-groups:index",
    "os_compute_api:os-server-groups:index:all_projects",
    "os_compute_api:os-server-groups:show",
    # Maintenance (disabled compute services): read only.
    "os_compute_api:os-services:list",
    # The plans' actions, and following them.
    "os_compute_api:os-migrate-server:migrate_live",
    # A drain's maintenance action cold_migrate: the migration to the
    # plan's destination and its confirmation.
    "os_compute_api:os-migrate-server:migrate",
    "os_compute_api:servers:confirm_resize",
    "os_compute_api:os-shelve:shelve",
    "os_compute_api:os-shelve:shelve_offload",
    "os_compute_api:os-shelve:unshelve",
    "os_compute_api:os-shelve:unshelve_to_host",
    # The dvms:shelved mark on a server it preempts (PUT), taken off when
    # the server is back (DELETE): the reviver finds dvms' shelves by it.
    "os_compute_api:server-metadata:update",
    "os_compute_api:server-metadata:delete",
    "os_compute_api:os-migrations:index",
    # Following a live migration's memory progress, and the completion
    # policy for one that does not converge (force-complete, abort).
    "os_compute_api:servers:migrations:index",
    "os_compute_api:servers:migrations:force_complete",
    "os_compute_api:servers:migrations:delete",
    # Only with [monitor] source = nova-diagnostics.
    "os_compute_api:os-server-diagnostics",
)

ADMIN = "role:admin"


def strip_admin(check):
    """check with the admin context's tests replaced by the admin role."""
    return check.replace("rule:context_is_admin", ADMIN).replace("is_admin:True", ADMIN)


def rules(defaults, role, new_defaults=False):
    """The policy as (name, check) pairs, in Nova's order: the rules that
    differ from Nova's defaults."""
    out = []
    names = set()
    for r in defaults:
        names.add(r.name)
        if r.name == "context_is_admin":
            out.append((r.name, "%s or role:%s" % (ADMIN, role)))
            continue
        check = r.check_str
        dep = getattr(r, "deprecated_rule", None)
        if dep and hasattr(dep, "check_str") and not new_defaults and dep.check_str != check:
            check = "(%s) or (%s)" % (check, dep.check_str)
        check = strip_admin(check)
        if r.name in GRANTED:
            check = "(%s) or role:%s" % (check, role)
        if check == r.check_str:
            continue  # Nova's default, no admin test in it: nothing to write
        out.append((r.name, check))
    missing = [g for g in GRANTED if g not in names]
    if "context_is_admin" not in names:
        missing.append("context_is_admin")
    if missing:
        raise SystemExit("dvms_nova.policy: this Nova has no rule %s" % ", ".join(missing))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--role", default="dvms", help="the agents' keystone role (default dvms)")
    ap.add_argument("--new-defaults", action="store_true",
                    help="Nova runs with [oslo_policy] enforce_new_defaults = true")
    args = ap.parse_args(argv)
    from nova import policies  # the installed Nova's rules

    out = sys.stdout
    out.write("# Nova policy for the dvms agents' role %r: written by `python3 -m\n" % args.role)
    out.write("# dvms_nova.policy`; see nova/dvms_nova/policy.py in the dvms tree.\n")
    for name, check in rules(policies.list_rules(), args.role, args.new_defaults):
        out.write('"%s": "%s"\n' % (name, check))


if __name__ == "__main__":
    main()
