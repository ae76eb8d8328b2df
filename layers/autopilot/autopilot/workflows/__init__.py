"""The Step Functions workflows as the rest of the code sees them: their inputs, and the waits
ClusterEventsFunction resumes."""
