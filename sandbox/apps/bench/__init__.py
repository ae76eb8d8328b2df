"""`make bench`: cold-start ratios and Step Functions state transitions (with the monthly cost they imply)."""
