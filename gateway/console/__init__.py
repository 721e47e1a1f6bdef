"""The console: memfed in a browser at /console, served from files inside this package.

It offers `Console` (its routes; give it the built app with `console.app = app`) and `Sessions`.
The browser side is plain ES modules and CSS in `static/`, written for memfed: nothing is downloaded,
built or fetched from elsewhere, so it works on an air-gapped network.
"""

from gateway.console.routes import Console
from gateway.console.sessions import Sessions

__all__ = ["Console", "Sessions"]
