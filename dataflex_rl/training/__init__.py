"""The GRPO recipe and its maths, the order training prompts are drawn in, and fault injection for resume tests."""
