// Money: ISO 4217 currencies, exact decimal strings, overflow-checked minor-unit arithmetic.
