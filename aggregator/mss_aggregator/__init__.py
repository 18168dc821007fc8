"""Desktop aggregator: additive counts, the LSMR decoder, simulation."""
