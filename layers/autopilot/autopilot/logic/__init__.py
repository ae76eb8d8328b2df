"""Use cases, one module each: they take and return models and reach AWS through the DAL and clients."""
