"""What is said about a Kimi Code key: where one comes from (`svc-monitor init`), and what to do
when the endpoint refuses it. Only a Kimi Code key has a coding plan to read."""

NEXT_STEP = "for a Kimi Code plan: an API key from https://www.kimi.com/code/console"
HOW = ("# To get a Kimi Code key: create one in the Kimi Code console (https://www.kimi.com/code/console);",
       "# a Moonshot Open Platform key has no coding plan to read.")
REFUSED = "The Kimi Code API key was refused: it has expired, was deleted, or is not a Kimi Code key."
FIX = ("create a key in the Kimi Code console (https://www.kimi.com/code/console) and paste it into its "
       "KIMI_API_KEY_ line")
