"""Idempotent bootstrap of the functional cloud, one Python process per phase
(an openstack CLI call costs ~2 s; this does a phase in a few seconds).

  bootstrap.py identity PASSWORD REGION IMAGE_URL PLACEMENT_URL COMPUTE_URL AGENT_PASSWORD
      service project, users glance/placement/nova (role admin in service),
      the dvms agents' user dvms (role dvms in project dvms, no admin: see
      etc/dvms/policy), services and endpoints (public, internal, admin)
  bootstrap.py resources IMAGE_FILE
      flavors dvms.tiny and dvms.small, the raw image dvms-tiny (public)

Credentials: OS_CLIENT_CONFIG_FILE / OS_CLOUD (the harness's admin cloud).
"""
import os
import sys

import openstack

SERVICES = (
    # name, type, url index in argv
    ("glance", "image", 4),
    ("placement", "placement", 5),
    ("nova", "compute", 6),
)

# The dvms agents' keystone user and role (devstack/functional/up.sh writes
# its cloud "dvms-agent" in clouds.yaml).
AGENT_USER = "dvms"
AGENT_ROLE = "dvms"
AGENT_PROJECT = "dvms"

FLAVORS = (
    # name, vcpus, ram MB, disk GB
    ("dvms.tiny", 1, 512, 1),
    ("dvms.small", 2, 2048, 1),
)


def say(msg):
    print("bootstrap: " + msg, flush=True)


def identity(conn, argv):
    password, region = argv[2], argv[3]
    idc = conn.identity
    project = idc.find_project("service", domain_id="default")
    if project is None:
        project = idc.create_project(name="service", domain_id="default", description="service accounts")
        say("created project service")
    admin_role = idc.find_role("admin")
    for name, _, _ in SERVICES:
        user = idc.find_user(name, domain_id="default")
        if user is None:
            user = idc.create_user(name=name, password=password, domain_id="default",
                                   default_project_id=project.id)
            say("created user " + name)
        else:
            idc.update_user(user, password=password)
        idc.assign_project_role_to_user(project, user, admin_role)
    # The agents' least-privilege account: role dvms only, which
    # the cloud's policy files grant exactly what an agent needs, in a
    # project of its own that holds no server (with Nova's legacy
    # defaults any role on a project lets its holder manage that
    # project's servers, and services such as Octavia boot theirs in
    # "service").
    agent_project = idc.find_project(AGENT_PROJECT, domain_id="default")
    if agent_project is None:
        agent_project = idc.create_project(name=AGENT_PROJECT, domain_id="default",
                                           description="dvms agents (no servers)")
        say("created project " + AGENT_PROJECT)
    dvms_role = idc.find_role(AGENT_ROLE) or idc.create_role(name=AGENT_ROLE)
    agent = idc.find_user(AGENT_USER, domain_id="default")
    if agent is None:
        agent = idc.create_user(name=AGENT_USER, password=argv[7], domain_id="default",
                                default_project_id=agent_project.id)
        say("created user %s (role %s in project %s)" % (AGENT_USER, AGENT_ROLE, AGENT_PROJECT))
    else:
        idc.update_user(agent, password=argv[7])
    idc.assign_project_role_to_user(agent_project, agent, dvms_role)
    for name, stype, idx in SERVICES:
        url = argv[idx]
        svc = next((s for s in idc.services() if s.type == stype), None)
        if svc is None:
            svc = idc.create_service(name=name, type=stype, is_enabled=True)
            say("created service %s (%s)" % (name, stype))
        existing = {e.interface: e for e in idc.endpoints(service_id=svc.id)}
        for interface in ("public", "internal", "admin"):
            ep = existing.get(interface)
            if ep is None:
                idc.create_endpoint(service_id=svc.id, interface=interface, url=url, region_id=region)
                say("created %s endpoint %s %s" % (interface, stype, url))
            elif ep.url != url:
                idc.update_endpoint(ep, url=url)


def resources(conn, argv):
    image_file = argv[2]
    for name, vcpus, ram, disk in FLAVORS:
        if conn.compute.find_flavor(name, ignore_missing=True) is None:
            conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
            say("created flavor %s (%d vCPU, %d MB, %d GB)" % (name, vcpus, ram, disk))
    # Nova's default quota (10 instances, 20 cores) is below what the
    # functional tests boot (40 servers on 8 hosts).
    project_id = conn.current_project_id
    conn.set_compute_quotas(project_id, instances=200, cores=400, ram=409600)
    say("compute quotas of the admin project: 200 instances, 400 cores, 400 GB RAM")
    image = conn.image.find_image("dvms-tiny", ignore_missing=True)
    if image is not None and image.status != "active":
        conn.image.delete_image(image)
        image = None
    if image is None:
        image = conn.image.create_image(name="dvms-tiny", disk_format="raw", container_format="bare",
                                        visibility="public")
        with open(image_file, "rb") as f:
            conn.image.put(
                "/images/%s/file" % image.id,
                data=f.read(),
                headers={"Content-Type": "application/octet-stream"},
            ).raise_for_status()
        image = conn.image.get_image(image.id)
        say("uploaded image dvms-tiny (%s, %s)" % (image.id, image.status))
        if image.status != "active":
            raise SystemExit("image dvms-tiny is %s, not active" % image.status)


def main(argv):
    conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "dvms-functional"))
    {"identity": identity, "resources": resources}[argv[1]](conn, argv)


if __name__ == "__main__":
    main(sys.argv)
