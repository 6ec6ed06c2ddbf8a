"""What is said about a z.ai key: where one comes from (`svc-monitor init`), and what to do when the
endpoint refuses it (z.ai says so in a 200 reply's envelope, reply.py)."""

NEXT_STEP = "for a z.ai GLM Coding Plan: an API key from https://z.ai/manage-apikey/apikey-list"
HOW = ("# To get a z.ai key: create one at https://z.ai/manage-apikey/apikey-list, signed in as the",
       "# account with the GLM Coding Plan (the key Claude Code is given as ANTHROPIC_AUTH_TOKEN).")
REFUSED = "The z.ai API key was refused: it has expired, was deleted, or is not a z.ai key."
FIX = "create a key at https://z.ai/manage-apikey/apikey-list and paste it into its ZAI_API_KEY_ line"
