"""The REST API: request/response models, routes (Powertools resolver) and the OpenAPI document."""
