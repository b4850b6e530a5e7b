"""How much of each table the report shows, so the page stays small whatever the repository."""
MAX_ROWS = 200
MAX_EXPLORER = 100
MAX_EVIDENCE = 20
MAX_FINDINGS = 200
HTML_SIZE_BOUND = 2_000_000       # bytes
