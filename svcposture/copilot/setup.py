"""What is said about a Copilot token: where one comes from (`svc-monitor init`), and what to do when
the endpoint refuses it. A GitHub token, not a Copilot one: the endpoint reads the seat behind it."""

NEXT_STEP = "for a Copilot account: gh auth token (signed in as its GitHub user)"
HOW = ("# To get a GitHub token with the account's Copilot seat: gh auth login, then gh auth token;",
       "# or the oauth_token in ~/.config/github-copilot/apps.json of an editor signed in to Copilot.")
REFUSED = "The GitHub token was refused: it has expired, was revoked, or is not a GitHub token."
FIX = "run `gh auth token` signed in as the account's GitHub user and paste it into its COPILOT_TOKEN_ line"
