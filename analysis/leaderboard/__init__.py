"""The checkpoint leaderboard: its document, tables, HTML page, groups, verdicts and command."""
