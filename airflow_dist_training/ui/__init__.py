"""The Training view: an Airflow 3 UI plugin (FastAPI app + external views) and its data."""
