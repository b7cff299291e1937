"""The Volcano scheduler configuration: parsing, validation and the default."""
