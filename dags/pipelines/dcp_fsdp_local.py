"""DAG built from the YAML file of the same name (see airflow_dist_training.dag_factory)."""

from airflow_dist_training.dag_factory import dag_from_yaml

dag = dag_from_yaml(__file__)
