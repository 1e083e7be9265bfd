"""``import acl`` as aclasync's simulated runtime.

Put this file's directory on ``sys.path`` (``PYTHONPATH="$(python -c 'import
aclasync.sim; print(aclasync.sim.acl_module_path())')"``) and ``import acl`` yields
``aclasync.sim.acl``, the process-wide simulated runtime, configured by
``ACLASYNC_SIM_STRICT``, ``ACLASYNC_SIM_DEVICE_COUNT``, ``ACLASYNC_SIM_SOC`` and
``ACLASYNC_SIM_EVENT_FLAGS``.
"""

from __future__ import annotations

from aclasync.sim._environ import install_as_acl

install_as_acl(__name__)
