"""Distilling our one-layer drafts from the frozen target: the resumable training loop (`training`), its text
(`selfdistill`: ShareGPT windows, the target's own answers), the prompts a draft learnt from (`provenance`) and shipping
it with its card (`export`)."""
