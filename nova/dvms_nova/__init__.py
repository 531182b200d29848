"""dvms_nova: dvms as a plugin of Nova's scheduler.

``dvms_nova.weigher.DvmsWeigher`` asks ``dvms scheduler-api`` to order the
candidate hosts by the demand the dvms agents measure, and falls back to
neutral weights (Nova's own order) on any error. See
doc/source/admin/scheduler-api.rst.
"""
