"""Pure domain: values, rules and ports. Imports only the standard library and errors."""
