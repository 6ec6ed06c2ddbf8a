"""The accounts env file (docs/posture.md): what its lines say, read as the shell reads them.

One job per module, nothing imported here:

- entries:    every vendor's account lines: names, emails, placeholders, what is usable
- shellword:  where a shell word ends, and where the shell reports a syntax error
- lint:       account lines the shell takes differently than their author meant
- exportline: the export line naming the active account, and rewriting it for a switch
- fileid:     which accounts file, as a fingerprint the monitor and a switch compare
"""
