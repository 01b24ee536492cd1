"""Serve mythloop's deployments from a checkout: `python deployments/serve.py`.

The same as `mythloop serve` without the preview and the server lookup (PREFECT_API_URL must
be set); the deployments themselves are defined in `mythloop_app/deployments.py`.
"""

from mythloop_app.deployments import main

if __name__ == "__main__":
    main()
