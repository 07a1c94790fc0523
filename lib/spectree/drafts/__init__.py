"""The draft models: draft specs (`draftspec`: layerskip, edd, vdm, hf, eagle, mix), our one-layer EDD / VDM drafts
(`edd`) and their checkpoints and cards (`storage`), EAGLE heads (`eagle`) and the draft of controlled quality
(`mix`)."""
