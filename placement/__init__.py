"""Resources -> placement group -> role bundles."""
