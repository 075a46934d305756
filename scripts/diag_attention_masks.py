"""GPU diagnostic: which attention masks of the model cases are rewritten (tiny configs)."""
import torch, solder
from solder.bench.models import gpt2, llama_train, bert_train, vit
for case in (gpt2, llama_train, bert_train, vit):
    w = case(torch.device("cuda"), True)
    torch._dynamo.reset()
    r = solder.explain(w.fn, *w.inputs)
    print(case.__name__, "rewrites", r.rewrites, "notes", r.notes)
