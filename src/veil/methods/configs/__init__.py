"""Every built-in method's config dataclass and card, one module per method module of `veil.methods` (`gpp_card`
for `gpp`, `eigan_card`, `baselines_card`, ...), on top of `method_card`. Nothing here imports torch: `veil.methods.cards` looks a card
up by name from these, so `veil methods` and the sweep and run checks answer without loading a method's code."""
