"""The `distrun` command line: its commands (`main`), entry point and text views."""
