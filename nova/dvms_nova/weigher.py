"""DvmsWeigher: a Nova host weigher that asks ``dvms scheduler-api``.

Enable it in nova-scheduler's nova.conf, listed after Nova's weighers so the
weights it sends are theirs::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,dvms_nova.weigher.DvmsWeigher

    [dvms]
    url = http://127.0.0.1:8095/scheduler/nova/external
    token_file = /etc/dvms/scheduler-api.token
    timeout = 1.0
    retry_after = 10.0
    weight_multiplier = 1.0

The token in token_file (the file dvms scheduler-api's [scheduler_api]
token_file names; readable by nova and dvms only) goes with each call as
"Authorization: Bearer TOKEN": scheduler-api refuses calls without it, and
only authenticated calls count their boot as pending on the host they put
first. The file is read at each call, so a rotated token takes effect at
once.

For each scheduling request (each instance of a multi-instance boot, as
Nova weighs them) the weigher makes one POST with the request and response
shapes of cortex's external scheduler API: the RequestSpec, the candidate
hosts in Nova's order and the weights Nova's weighers gave them. It turns
the answer's order into weights (the first host 1.0, the last 1/n, hosts
left out 0). Any error -- no URL, timeout, connection refused, HTTP error,
malformed answer -- gives every host the same weight, so Nova's own order
stands, and is logged with its reason: dvms never fails a boot. After a
failed call the weigher keeps Nova's order without asking for retry_after
seconds (each weighing still logs why), so a hung service costs one
timeout per period, not one per server booted.
"""

import json
import threading
import time
import urllib.error
import urllib.request

from oslo_config import cfg
from oslo_log import log as logging

import nova.conf
from nova.scheduler import utils
from nova.scheduler import weights

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

dvms_group = cfg.OptGroup(
    'dvms', title='dvms scheduler-api',
    help='Where the DvmsWeigher asks dvms scheduler-api.')

dvms_opts = [
    cfg.StrOpt(
        'url', default='',
        help='URL of dvms scheduler-api, e.g. '
             'http://127.0.0.1:8095/scheduler/nova/external. Empty: the '
             'weigher gives every host the same weight.'),
    cfg.StrOpt(
        'token_file', default='',
        help='File whose first line is the token dvms scheduler-api '
             'expects ([scheduler_api] token_file there), sent as '
             '"Authorization: Bearer TOKEN". Empty: no token is sent; a '
             'scheduler-api with a token refuses the call (Nova\'s order), '
             'one without answers but counts no pending boot.'),
    cfg.FloatOpt(
        'timeout', default=1.0, min=0.01,
        help='Seconds to wait for dvms scheduler-api before keeping '
             'Nova\'s order.'),
    cfg.FloatOpt(
        'retry_after', default=10.0, min=0,
        help='Seconds after a failed call during which the weigher keeps '
             'Nova\'s order without asking (a hung or stopped '
             'scheduler-api then costs one timeout per period, not one per '
             'weighing). 0: ask every time.'),
    cfg.FloatOpt(
        'weight_multiplier', default=1.0,
        help='Multiplier of the dvms weight (in [0, 1] after Nova\'s '
             'normalization, as every weigher\'s). The default is Nova\'s '
             'for its own weighers (RAM, CPU, disk, soft affinity, soft '
             'anti-affinity: 1.0 each): dvms counts as one more of them '
             'and server groups\' soft policies keep their effect. Among n '
             'candidates two neighbours in dvms\' order differ by '
             'multiplier / (n - 1), against about 4 for Nova\'s RAM, CPU, '
             'disk and I/O ops weighers together: about 4 * (n - 1) lets '
             'dvms\' order (which already counts Nova\'s weights) '
             'prevail; then raise soft_affinity_weight_multiplier and '
             'soft_anti_affinity_weight_multiplier above it, and stay '
             'below BuildFailureWeigher\'s 1000000. The aggregate '
             'metadata dvms_weight_multiplier overrides it per aggregate.'),
]

CONF.register_group(dvms_group)
CONF.register_opts(dvms_opts, group=dvms_group)


def list_opts():
    # oslo-config-generator --namespace dvms_nova (nova/pyproject.toml).
    return [(dvms_group, dvms_opts)]


class DvmsError(Exception):
    """The answer of dvms scheduler-api could not be used."""


def _request_id(spec_obj):
    """Nova's global request id of the scheduling request, if known."""
    ctx = getattr(spec_obj, '_context', None)
    for attr in ('global_id', 'request_id'):
        value = getattr(ctx, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _spec_primitive(spec_obj):
    to_primitive = getattr(spec_obj, 'obj_to_primitive', None)
    if to_primitive is None:
        raise DvmsError('the request spec cannot be serialized')
    return to_primitive()


def read_token(path):
    """The token of token_file: its first line, stripped."""
    with open(path, encoding='utf-8') as f:
        token = f.readline().strip()
    if not token:
        raise DvmsError('token_file %s is empty' % path)
    return token


def ask(url, timeout, weighed_hosts, spec_obj, token=None):
    """POST one scheduling request; return the host names in dvms' order.

    Raises DvmsError (or OSError, ValueError) when the answer cannot be
    used.
    """
    body = {
        'spec': _spec_primitive(spec_obj),
        # Zed's RequestSpec says rebuild (a hint); resize and live
        # migration are not told apart from a boot here.
        'rebuild': bool(utils.request_is_rebuild(spec_obj)),
        'resize': False,
        'live': False,
        'vmware': False,
        'hosts': [{'host': h.obj.host,
                   'hypervisor_hostname': getattr(h.obj, 'nodename', None)}
                  for h in weighed_hosts],
        'weights': {h.obj.host: h.weight for h in weighed_hosts},
    }
    data = json.dumps(body, default=str).encode('utf-8')
    headers = {'Content-Type': 'application/json'}
    rid = _request_id(spec_obj)
    if rid:
        headers['X-OpenStack-Request-ID'] = rid
    if token:
        headers['Authorization'] = 'Bearer ' + token
    req = urllib.request.Request(url, data=data, headers=headers,
                                 method='POST')
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            answer = json.loads(resp.read().decode('utf-8'))
    except urllib.error.HTTPError as e:
        e.close()
        raise DvmsError('HTTP %d from scheduler-api' % e.code)
    if not isinstance(answer, dict) or not isinstance(
            answer.get('hosts'), list):
        raise DvmsError('answer without a "hosts" list')
    hosts = answer['hosts']
    if not all(isinstance(h, str) for h in hosts):
        raise DvmsError('answer with a host that is not a string')
    candidates = {h.obj.host for h in weighed_hosts}
    unknown = [h for h in hosts if h not in candidates]
    if unknown:
        raise DvmsError('answer names hosts that are not candidates: %s'
                        % ', '.join(unknown))
    if not hosts:
        raise DvmsError('answer keeps no host')
    return hosts


def weights_from_order(order, hosts):
    """Raw weights: the first of order 1.0 ... the last 1/n, others 0."""
    n = len(order)
    rank = {h: (n - i) / n for i, h in enumerate(order)}
    return {h: rank.get(h, 0.0) for h in hosts}


class DvmsWeigher(weights.BaseHostWeigher):
    """Prefer the hosts dvms scheduler-api puts first (see module doc)."""

    def __init__(self):
        super().__init__()
        # Weights of the requests being weighed, by request: nova-scheduler
        # shares one weigher between concurrent requests.
        self._lock = threading.Lock()
        self._pending = {}
        # Counters for operators and tests.
        self.calls = 0
        self.fallbacks = 0
        # The last failed call: when (self._clock) and why; while within
        # [dvms] retry_after of it, Nova's order without asking.
        self._clock = time.monotonic
        self._failed_at = None
        self._failure = ''

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(
            host_state, 'dvms_weight_multiplier',
            CONF.dvms.weight_multiplier)

    def weigh_objects(self, weighed_obj_list, weight_properties):
        hosts = [h.obj.host for h in weighed_obj_list]
        key = id(weight_properties)
        ws = self._weights(weighed_obj_list, weight_properties, hosts)
        with self._lock:
            self._pending[key] = ws
        try:
            return super().weigh_objects(weighed_obj_list, weight_properties)
        finally:
            with self._lock:
                self._pending.pop(key, None)

    def _weigh_object(self, host_state, weight_properties):
        with self._lock:
            ws = self._pending.get(id(weight_properties), {})
        return ws.get(host_state.host, 0.0)

    def _weights(self, weighed_obj_list, spec_obj, hosts):
        neutral = {h: 0.0 for h in hosts}
        if len(hosts) <= 1:
            return neutral
        url = CONF.dvms.url
        rid = _request_id(spec_obj)
        if not url:
            self.fallbacks += 1
            LOG.warning('dvms: [dvms] url is not set: Nova\'s order '
                        '(request %s)', rid)
            return neutral
        with self._lock:
            failed_at, failure = self._failed_at, self._failure
        if failed_at is not None:
            since = self._clock() - failed_at
            if since < CONF.dvms.retry_after:
                self.fallbacks += 1
                LOG.warning('dvms: scheduler-api at %s not used (it failed '
                            '%.1f s ago, %s; next try in %.1f s): Nova\'s '
                            'order (request %s)', url, since, failure,
                            CONF.dvms.retry_after - since, rid)
                return neutral
        self.calls += 1
        try:
            token = None
            if CONF.dvms.token_file:
                token = read_token(CONF.dvms.token_file)
            order = ask(url, CONF.dvms.timeout, weighed_obj_list, spec_obj,
                        token)
        except Exception as e:  # fail-open: never fail a boot
            self.fallbacks += 1
            with self._lock:
                self._failed_at = self._clock()
                self._failure = '%s: %s' % (type(e).__name__, e)
            LOG.warning('dvms: scheduler-api at %s not used (%s: %s): '
                        'Nova\'s order (request %s)', url,
                        type(e).__name__, e, rid)
            return neutral
        with self._lock:
            self._failed_at = None
        LOG.debug('dvms: scheduler-api order %s (request %s)', order, rid)
        return weights_from_order(order, hosts)
