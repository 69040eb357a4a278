"""The math a reader came for: config, one function per stage, rotary, heads, parameters, KV cache, interventions, tokenizer, the stage table. numpy only."""
