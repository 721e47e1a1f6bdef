"""memfed: one UHP Memories endpoint in front of many memory vendors."""

__version__ = "0.1.0"
