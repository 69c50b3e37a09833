"""Spark standalone clusters as compute targets (the counterpart of an attached Synapse pool)."""
