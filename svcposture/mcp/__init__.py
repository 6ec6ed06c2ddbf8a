"""`svc-monitor mcp`: the node's posture for coding agents, as a Model Context Protocol server on stdio.

- wire: JSON-RPC 2.0 messages, one per line, read from a descriptor within a line bound
- session: the protocol: initialize and its version negotiation, dispatch, batches, errors
- tools: the tools and resources, read from the local monitor (never the provider)
- main: the command line, and stdout kept for JSON-RPC alone

See docs/mcp.md.
"""
