"""Unit tests of DvmsWeigher against a local HTTP server.

Run with Debian's python3 and python3-nova, from the repository root:

    PYTHONPATH=nova /usr/bin/python3 -m unittest discover -s nova/dvms_nova/tests -t nova
"""

import http.server
import json
import os
import shutil
import tempfile
import threading
import unittest

from nova import context as nova_context
from nova import objects
from nova.scheduler import weights
from nova.scheduler.weights import affinity

from dvms_nova import weigher

objects.register_all()


class FakeHostState(object):
    def __init__(self, host):
        self.host = host
        self.nodename = host
        self.aggregates = []

    def __repr__(self):
        return 'FakeHostState(%s)' % self.host


class NovaOrderWeigher(weights.BaseHostWeigher):
    """Stands for Nova's own weighers: prefers hosts in list order."""

    order = []

    def _weigh_object(self, host_state, weight_properties):
        return float(len(self.order) - self.order.index(host_state.host))


class Server(object):
    """A local scheduler-api: records requests, answers as told."""

    def __init__(self):
        self.requests = []
        self.answer = {'hosts': []}
        self.status = 200
        self.release = None  # an Event the handler waits for, if set
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get('Content-Length', '0'))
                outer.requests.append(
                    (dict(self.headers), json.loads(self.rfile.read(n))))
                if outer.release is not None:
                    outer.release.wait(10)
                body = outer.answer
                if not isinstance(body, bytes):
                    body = json.dumps(body).encode('utf-8')
                try:
                    self.send_response(outer.status)
                    self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     Handler)
        self.httpd.daemon_threads = True
        self.url = 'http://127.0.0.1:%d/scheduler/nova/external' % (
            self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        if self.release is not None:
            self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def spec(vcpus=2, ram=2048, group=None):
    s = objects.RequestSpec(
        flavor=objects.Flavor(name='m1.test', vcpus=vcpus, memory_mb=ram),
        num_instances=1,
        instance_uuid='11111111-2222-3333-4444-555555555555',
        scheduler_hints={})
    if group is not None:
        s.instance_group = group
    s._context = nova_context.RequestContext(
        'user', 'project', is_admin=True,
        request_id='req-11111111-2222-3333-4444-555555555555')
    return s


# The request dvms scheduler-api's Go tests parse (TestNovaRequestFixture):
# both sides are held to the same bytes.
FIXTURE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                       'scheduler', 'extsched', 'testdata',
                       'nova_request.json')


def without_changes(v):
    """v without oslo's nova_object.changes (a set: its order varies)."""
    if isinstance(v, dict):
        return {k: without_changes(x) for k, x in v.items()
                if k != 'nova_object.changes'}
    if isinstance(v, list):
        return [without_changes(x) for x in v]
    return v


def fixture_spec():
    s = objects.RequestSpec(
        flavor=objects.Flavor(name='m1.small', vcpus=2, memory_mb=2048,
                              root_gb=1, extra_specs={}),
        num_instances=1,
        instance_uuid='11111111-2222-3333-4444-555555555555',
        project_id='p1',
        instance_group=objects.InstanceGroup(
            uuid='66666666-7777-8888-9999-000000000000',
            policy='anti-affinity', hosts=['compute-2'],
            members=['aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee']),
        scheduler_hints={'group': ['66666666-7777-8888-9999-000000000000']})
    return s


class FixtureTest(unittest.TestCase):
    def test_request_is_the_go_fixture(self):
        server = Server()
        self.addCleanup(server.stop)
        server.answer = {'hosts': ['compute-3']}
        hosts = []
        for name, w in (('compute-1', 1.5), ('compute-2', 0.5),
                        ('compute-3', 1.0)):
            h = FakeHostState(name)
            h.nodename = name + '.node'
            hosts.append(weights.WeighedHost(h, w))
        self.assertEqual(['compute-3'],
                         weigher.ask(server.url, 2.0, hosts, fixture_spec()))
        with open(FIXTURE) as f:
            want = json.load(f)
        self.assertEqual(want, without_changes(server.requests[0][1]))


class DvmsWeigherTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.stop)
        weigher.CONF.set_override('url', self.server.url, group='dvms')
        weigher.CONF.set_override('timeout', 2.0, group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'url', group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'timeout',
                        group='dvms')
        # dvms' order must prevail over NovaOrderWeigher (1.0): among 3
        # candidates above 1 * (3 - 1), as the option's help says.
        weigher.CONF.set_override('weight_multiplier', 10.0, group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'weight_multiplier',
                        group='dvms')
        self.hosts = [FakeHostState(h) for h in ('busy', 'drain', 'idle')]
        NovaOrderWeigher.order = ['busy', 'drain', 'idle']
        self.dvms = weigher.DvmsWeigher()

    def weigh(self, s=None):
        handler = weights.HostWeightHandler()
        return handler.get_weighed_objects(
            [NovaOrderWeigher(), self.dvms], self.hosts, s or spec())

    def test_dvms_order_wins_and_nova_weights_are_sent(self):
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        got = [w.obj.host for w in self.weigh()]
        self.assertEqual(['idle', 'busy', 'drain'], got)
        self.assertEqual(1, len(self.server.requests))
        headers, body = self.server.requests[0]
        self.assertEqual(
            'req-11111111-2222-3333-4444-555555555555',
            headers.get('X-Openstack-Request-Id') or
            headers.get('X-OpenStack-Request-ID'))
        self.assertEqual(['busy', 'drain', 'idle'],
                         [h['host'] for h in body['hosts']])
        # Nova's weighers ran first: their normalized weights are sent.
        self.assertEqual({'busy': 1.0, 'drain': 0.5, 'idle': 0.0},
                         body['weights'])
        data = body['spec']['nova_object.data']
        self.assertEqual(2, data['flavor']['nova_object.data']['vcpus'])
        self.assertEqual(2048,
                         data['flavor']['nova_object.data']['memory_mb'])
        self.assertFalse(body['rebuild'])

    def test_default_multiplier_leaves_soft_anti_affinity_first(self):
        # Nova's own soft anti-affinity weigher (multiplier 1.0) with dvms
        # at its default: a member of the group is on h8, which dvms puts
        # first (h8 ... h1). The group's policy keeps h8 out of first
        # place; among the other hosts dvms' order stands.
        names = ['h%d' % i for i in range(1, 9)]
        self.hosts = [FakeHostState(h) for h in names]
        for h in self.hosts:
            h.instances = {}
        self.hosts[-1].instances = {'member-1': None}
        g = objects.InstanceGroup(policy='soft-anti-affinity',
                                  members=['member-1'], hosts=['h8'])
        self.server.answer = {'hosts': list(reversed(names))}
        handler = weights.HostWeightHandler()

        def order():
            return [w.obj.host for w in handler.get_weighed_objects(
                [affinity.ServerGroupSoftAntiAffinityWeigher(), self.dvms],
                self.hosts, spec(group=g))]

        weigher.CONF.clear_override('weight_multiplier', group='dvms')
        self.assertEqual(1.0, weigher.CONF.dvms.weight_multiplier)
        self.assertEqual(['h7', 'h6', 'h5', 'h4', 'h3', 'h2'], order()[:6])
        # The test can fail: the former default, 1000, put dvms' h8 first.
        weigher.CONF.set_override('weight_multiplier', 1000.0, group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'weight_multiplier',
                        group='dvms')
        self.assertEqual('h8', order()[0])

    def test_multiplier_above_4_per_neighbour_keeps_dvms_order(self):
        # The option's help: four weighers of Nova's (as RAM, CPU, disk
        # and I/O ops: 1.0 each) all prefer h1, far emptier in placement,
        # and rate the others alike; dvms answers h8 ... h1 (h1 busy).
        # Among n = 8 candidates neighbours are multiplier / 7 apart:
        # above 4 * 7 dvms' order prevails, below it h1 climbs.
        names = ['h%d' % i for i in range(1, 9)]
        self.hosts = [FakeHostState(h) for h in names]
        self.server.answer = {'hosts': list(reversed(names))}
        handler = weights.HostWeightHandler()

        class EmptiestWeigher(weights.BaseHostWeigher):
            def _weigh_object(self, host_state, weight_properties):
                return 1.0 if host_state.host == 'h1' else 0.0

        def order(multiplier):
            weigher.CONF.set_override('weight_multiplier', multiplier,
                                      group='dvms')
            return [w.obj.host for w in handler.get_weighed_objects(
                [EmptiestWeigher() for _ in range(4)] + [self.dvms],
                self.hosts, spec())]

        self.addCleanup(weigher.CONF.clear_override, 'weight_multiplier',
                        group='dvms')
        self.assertEqual(list(reversed(names)), order(29.0))
        self.assertNotEqual(list(reversed(names)), order(27.0))

    def test_hosts_left_out_weigh_least(self):
        self.server.answer = {'hosts': ['idle', 'busy']}
        got = [w.obj.host for w in self.weigh()]
        self.assertEqual(['idle', 'busy', 'drain'], got)

    def test_group_is_sent(self):
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        g = objects.InstanceGroup(policy='anti-affinity', hosts=['busy'])
        self.weigh(spec(group=g))
        data = self.server.requests[0][1]['spec']['nova_object.data']
        group = data['instance_group']['nova_object.data']
        self.assertEqual('anti-affinity', group['policy'])
        self.assertEqual(['busy'], group['hosts'])

    def assertNovaOrder(self):
        with self.assertLogs('dvms_nova.weigher', level='WARNING') as logs:
            got = [w.obj.host for w in self.weigh()]
        self.assertEqual(['busy', 'drain', 'idle'], got)
        self.assertEqual(1, self.dvms.fallbacks)
        return '\n'.join(logs.output)

    def test_token_is_sent(self):
        # The token file's first line goes as a bearer token; a rotated
        # token is read at the next call.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, 'token')
        with open(path, 'w') as f:
            f.write('first-token-0123456789\nignored\n')
        weigher.CONF.set_override('token_file', path, group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'token_file',
                        group='dvms')
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.weigh()
        with open(path, 'w') as f:
            f.write('second-token-0123456789\n')
        self.weigh()
        got = [h.get('Authorization') for h, _ in self.server.requests]
        self.assertEqual(['Bearer first-token-0123456789',
                          'Bearer second-token-0123456789'], got)

    def test_no_token_file_sends_no_token(self):
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.weigh()
        self.assertIsNone(self.server.requests[0][0].get('Authorization'))

    def test_unreadable_token_keeps_nova_order(self):
        weigher.CONF.set_override('token_file', '/nonexistent/dvms.token',
                                  group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'token_file',
                        group='dvms')
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.assertIn('dvms.token', self.assertNovaOrder())
        self.assertEqual([], self.server.requests)

    def test_unauthorized_keeps_nova_order(self):
        self.server.status = 401
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.assertIn('HTTP 401', self.assertNovaOrder())

    def test_http_error_keeps_nova_order(self):
        self.server.status = 500
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.assertIn('HTTP 500', self.assertNovaOrder())

    def test_malformed_answers_keep_nova_order(self):
        for answer, why in [
                (b'not json', 'JSONDecodeError'),
                ({'order': ['idle']}, 'without a "hosts" list'),
                ({'hosts': ['idle', 7]}, 'not a string'),
                ({'hosts': ['elsewhere']}, 'not candidates'),
                ({'hosts': []}, 'keeps no host')]:
            with self.subTest(answer=answer):
                self.dvms = weigher.DvmsWeigher()
                self.server.answer = answer
                self.assertIn(why, self.assertNovaOrder())

    def test_timeout_keeps_nova_order(self):
        weigher.CONF.set_override('timeout', 0.2, group='dvms')
        self.server.release = threading.Event()
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.assertIn('timed out', self.assertNovaOrder())

    def test_no_call_for_retry_after_a_failure(self):
        # A hung service: one timeout, then Nova's order without asking
        # (each weighing says why) until retry_after has passed.
        weigher.CONF.set_override('timeout', 0.2, group='dvms')
        weigher.CONF.set_override('retry_after', 10.0, group='dvms')
        self.addCleanup(weigher.CONF.clear_override, 'retry_after',
                        group='dvms')
        now = [100.0]
        self.dvms._clock = lambda: now[0]
        self.server.release = threading.Event()
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.assertIn('timed out', self.assertNovaOrder())
        now[0] += 4.0
        self.dvms.fallbacks = 0
        logged = self.assertNovaOrder()
        self.assertIn('failed 4.0 s ago, TimeoutError', logged)
        self.assertIn('next try in 6.0 s', logged)
        self.assertEqual(1, len(self.server.requests))
        # Past retry_after it asks again, and an answer ends the pause.
        self.server.release.set()
        now[0] += 6.0
        self.assertEqual(['idle', 'busy', 'drain'],
                         [w.obj.host for w in self.weigh()])
        self.assertEqual(2, len(self.server.requests))
        self.assertEqual(['idle', 'busy', 'drain'],
                         [w.obj.host for w in self.weigh()])
        self.assertEqual(3, len(self.server.requests))

    def test_service_down_keeps_nova_order(self):
        self.server.stop()
        self.assertIn('Connection refused', self.assertNovaOrder())

    def test_no_url_keeps_nova_order(self):
        weigher.CONF.set_override('url', '', group='dvms')
        self.assertIn('url is not set', self.assertNovaOrder())
        self.assertEqual([], self.server.requests)

    def test_one_request_per_weighing(self):
        self.server.answer = {'hosts': ['idle', 'busy', 'drain']}
        self.weigh()
        self.weigh()
        self.assertEqual(2, len(self.server.requests))
        self.assertEqual(2, self.dvms.calls)
        self.assertEqual({}, self.dvms._pending)

    def test_weights_from_order(self):
        self.assertEqual({'a': 1.0, 'b': 0.5, 'c': 0.0},
                         weigher.weights_from_order(['a', 'b'],
                                                    ['c', 'b', 'a']))


if __name__ == '__main__':
    unittest.main()
