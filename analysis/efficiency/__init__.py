"""What thinking in parallel buys in latency, and test-time controllers replayed on recorded branches."""
