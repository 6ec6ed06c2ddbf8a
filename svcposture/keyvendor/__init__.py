"""Vendors whose account is one key in the accounts env file (docs/vendors.md): the common part.

GitHub Copilot, z.ai and Kimi each read the same way: an account is one
secret value on a `<PREFIX><NAME>=<key>` line, the probe child sends one GET
per account with that key, and the reply is read to windows. What differs
(the request, the reply's shape, the sentence for a refused key, the knob,
the setup help, the demo's answer) is the vendor's own package; what is the
same is here, once. One job per module, nothing imported here:

- quota:    a quota as a window (counts or percent, unlimited, a zero entitlement), its reset, its place by length
- exchange: one key's request (child side): the bounded GET, its status, the reply handed to the vendor's parser
- errors:   the common error vocabulary with the vendor's refused sentence and fix, and each error's health
- sweep:    the child's part for one such vendor: its entries, the active one, one exchange each, the block
- report:   the child's block whitelisted at every depth for the monitor
- vendor:   the `Vendor` protocol over a vendor's `KeyPlan`, its setup help and its demo part
- demo:     a key vendor's part of `svc-monitor demo`: one key, and its endpoint's answers
"""
