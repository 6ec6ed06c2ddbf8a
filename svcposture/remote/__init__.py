"""What a listener off the loopback asks of the node: the bearer token file, the TLS certificate
and key, and what counts as the loopback.

The monitor's scrape listener and its `--allow-remote` main listener (monitor/exposure.py), `svc-monitor init
--metrics-token` and `svc-cluster doctor` all judge these files by the same rules, so those rules live
here, below all three: address.py, token.py, certificate.py.
"""
