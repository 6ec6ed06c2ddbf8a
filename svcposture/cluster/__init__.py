"""The cluster side of a node: config mirror (bundle, join, roster, sync),
process control and cloud-env projection, the liveness anchor (tracker,
publisher, peer status, HRW) and the doctor."""
