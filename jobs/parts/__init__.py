"""What a part is for each kind of work, one room (package) per capability: audit/, cutoff/, doc_mia/, impact/,
index/, overlap/, release/, text_only/, trace/; at the top only what several rooms read (doc_inputs)."""
