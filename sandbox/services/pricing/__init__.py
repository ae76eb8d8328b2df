"""Pricing: the AWS Price List Query API simulator (``price_list_api``) and the instance-hour list prices
it serves and the Budgets simulator charges (``list_prices``)."""
