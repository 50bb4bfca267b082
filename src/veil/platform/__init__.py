"""Ray glue: Train executors, node and coordinator actors, aggregation strategies."""
