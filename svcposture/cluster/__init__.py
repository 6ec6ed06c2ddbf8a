"""The cluster side of a node (docs/liveness.md). One job per module:

- mirror:   classify, bundle export, bundle parsing, join
- roster:   the cluster repo checkout, git, roster list/add/remove
- sync:     decrypt the cluster secrets and write them (svc-cluster sync)
- cloudenv: the cloud-token projection into cluster.env and ~/.zshenv
- stack:    process control of the monitor and the svc-stack command line
- liveness: settings, heartbeat publisher, peer status, Loki read, set-anchor/status
- heartbeat: the heartbeat's format: metadata builders (pure) and the peer readers
- hostaccounts: the heartbeat's `accounts` list, every account of a host with its key
- fleetaccounts: the fleet by account (GET /api/fleet/accounts), a pure view of a status report
- promread: liveness and accounts read from Prometheus (four queries whatever the fleet size)
- fleetread: the replies of that read parsed into status rows (pure)
- status:   svc-cluster status, of the cluster or (--url) of a running monitor's fleet view
- tracker:  the Linear-compatible GraphQL client the liveness anchor lives on
- hrw:      which host owns a ticket (highest random weight), svc-cluster owner
- doctor:   every check: svc-cluster doctor and join's PER-NODE checklist
- commands: the order of the svc-cluster commands; _common: what they share
"""
