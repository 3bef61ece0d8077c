"""A tiny Llama-architecture decoder, re-implemented stage by stage for dump_probe.

The weights come from ``transformers.LlamaForCausalLM`` built from ``CONFIG``
with ``torch.manual_seed(0)``; ``TinyLlama`` runs the same computation
explicitly (RMSNorm, RoPE, grouped-query attention over a static KV cache,
SwiGLU MLP) so every intermediate tensor can be captured under a stable stage
name.  ``check_against_hf`` proves the re-implementation matches HF's logits.

Stages of one forward call, in capture order (L = 6 layers, 19 per layer):

    embed
    layers.{i}.input_norm .q .k .v .q_rope .k_rope
    layers.{i}.k_cache_write .v_cache_write .k_cache_read .v_cache_read
    layers.{i}.attn .o_proj .residual_attn .post_norm
    layers.{i}.mlp_gate .mlp_up .mlp_act .mlp_down .residual_mlp
    final_norm
    logits

``Runner`` adds ``runner.input_ids`` and ``runner.logits`` around the model
(outside any graph region), so one eager window holds 2 + 3 + 19 * 6 = 119
records.  Tensors are [tokens, ...] (no batch dimension, one request).
"""

import torch

CONFIG = dict(
    hidden_size=256,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=688,
    vocab_size=1024,
    max_position_embeddings=128,
    rope_theta=10000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)
SEED = 0

# Fixed prompt (12 ids of the 1024-id vocabulary); no tokenizer is involved.
PROMPT_IDS = [1, 307, 52, 918, 14, 611, 233, 75, 480, 999, 5, 128]

# Capacity of the static KV cache, in tokens.
MAX_TOKENS = 32

STAGES_PER_LAYER = (
    "input_norm", "q", "k", "v", "q_rope", "k_rope",
    "k_cache_write", "v_cache_write", "k_cache_read", "v_cache_read",
    "attn", "o_proj", "residual_attn", "post_norm",
    "mlp_gate", "mlp_up", "mlp_act", "mlp_down", "residual_mlp",
)


def deterministic():
    """Single thread, deterministic kernels: two runs give bit-identical dumps."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def weights_tag(extra=""):
    """The ``weights`` metadata: how to rebuild exactly these weights."""
    args = ",".join("%s=%r" % item for item in sorted(CONFIG.items()))
    tag = "seeded:torch.manual_seed(%d);LlamaForCausalLM(LlamaConfig(%s))" % (SEED, args)
    return tag + (";" + extra if extra else "")


def build_hf_model():
    """LlamaForCausalLM with seeded weights, float32, eager attention, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(**CONFIG, attn_implementation="eager")
    return LlamaForCausalLM(config).eval()


class _NoProbe:
    """Stand-in for dump_probe when nothing is captured (tests, self-check)."""

    @staticmethod
    def capture(stage, tensor):
        pass

    @staticmethod
    def capture_inputs(stage, **named):
        pass

    @staticmethod
    def capture_graph(stage, tensor):
        pass


def rms_norm(x, weight, eps):
    """HF LlamaRMSNorm: reduce in float32, scale in the input dtype."""
    x32 = x.to(torch.float32)
    variance = x32.pow(2).mean(-1, keepdim=True)
    x32 = x32 * torch.rsqrt(variance + eps)
    return weight * x32.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):
    """x: [T, heads, head_dim]; cos, sin: [T, head_dim]."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


class TinyLlama:
    """Explicit forward over the weights of an HF LlamaForCausalLM.

    dtype: compute dtype (weights are cast once).  kv_fault: the K-cache
    writer reinterprets the NHD cache [tokens, kv_heads, head_dim] as HND
    [kv_heads, tokens, head_dim] (the reader stays NHD), the stomping bug of
    the llama_kv_alias example.  probe: the dump_probe module, or None.
    """

    def __init__(self, hf, dtype=torch.float32, max_tokens=MAX_TOKENS, kv_fault=False, probe=None):
        cfg = hf.config
        self.dtype = dtype
        self.max_tokens = max_tokens
        self.kv_fault = kv_fault
        self.probe = probe or _NoProbe
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.scaling = self.head_dim ** -0.5

        def w(t):
            return t.detach().to(dtype)

        model = hf.model
        self.embed = w(model.embed_tokens.weight)
        self.layers = []
        for layer in model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            self.layers.append(dict(
                input_norm=w(layer.input_layernorm.weight),
                q=w(attn.q_proj.weight), k=w(attn.k_proj.weight), v=w(attn.v_proj.weight),
                o=w(attn.o_proj.weight),
                post_norm=w(layer.post_attention_layernorm.weight),
                gate=w(mlp.gate_proj.weight), up=w(mlp.up_proj.weight), down=w(mlp.down_proj.weight),
            ))
        self.final_norm = w(model.norm.weight)
        self.lm_head = w(hf.lm_head.weight)
        self.inv_freq = model.rotary_emb.inv_freq.detach().to(torch.float32).clone()
        self.attention_scaling = float(model.rotary_emb.attention_scaling)
        self.reset_cache()

    def reset_cache(self):
        shape = (self.max_tokens, self.kv_heads, self.head_dim)  # NHD
        self.k_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]

    def _rope_tables(self, positions):
        freqs = positions[:, None].to(torch.float32) * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * self.attention_scaling).to(self.dtype)
        sin = (emb.sin() * self.attention_scaling).to(self.dtype)
        return cos, sin

    def _write_cache(self, cache, start, values, fault):
        """Store values [T, kv_heads, head_dim] at positions start..start+T; return the written view."""
        end = start + values.shape[0]
        if fault:
            # The bug: the writer believes the buffer is HND.  Same bytes,
            # different strides: (head_dim, max_tokens*head_dim, 1) instead of
            # (kv_heads*head_dim, head_dim, 1).
            dst = cache.view(self.kv_heads, self.max_tokens, self.head_dim)[:, start:end, :].transpose(0, 1)
        else:
            dst = cache[start:end]
        dst.copy_(values)
        return dst

    def forward(self, ids, start, mode="eager"):
        """Logits [T, vocab] for token ids [T] at positions start..start+T-1.

        mode "eager" runs every capture(); mode "graph" emulates a graph
        replay: the capture() calls of the forward do not run (Python does not
        execute during a replay), only capture_graph() into preallocated slots
        for each layer's residual_mlp.
        """
        eager = mode == "eager"
        p = self.probe
        cap = p.capture if eager else _NoProbe.capture
        cap_inputs = p.capture_inputs if eager else _NoProbe.capture_inputs
        T = ids.shape[0]
        end = start + T
        if end > self.max_tokens:
            raise ValueError("KV cache holds %d tokens, asked for %d" % (self.max_tokens, end))
        positions = torch.arange(start, end)
        cos, sin = self._rope_tables(positions)
        # Causal mask over the cached keys 0..end-1 for queries start..end-1.
        key_pos = torch.arange(end)
        mask = torch.zeros(T, end, dtype=torch.float32)
        mask.masked_fill_(key_pos[None, :] > positions[:, None], float("-inf"))
        group = self.heads // self.kv_heads

        h = self.embed[ids]
        cap("embed", h)
        for i, lw in enumerate(self.layers):
            name = "layers.%d." % i
            if i == 0:
                cap_inputs(name + "input_norm", x=h, weight=lw["input_norm"], eps=self.eps,
                           outputs=name + "input_norm")
            x = rms_norm(h, lw["input_norm"], self.eps)
            cap(name + "input_norm", x)
            q = (x @ lw["q"].T).view(T, self.heads, self.head_dim)
            k = (x @ lw["k"].T).view(T, self.kv_heads, self.head_dim)
            v = (x @ lw["v"].T).view(T, self.kv_heads, self.head_dim)
            cap(name + "q", q)
            cap(name + "k", k)
            cap(name + "v", v)
            if i == 0:
                cap_inputs(name + "rope", q=q, k=k, cos=cos, sin=sin, positions=positions,
                           outputs=(name + "q_rope", name + "k_rope"))
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
            cap(name + "q_rope", q)
            cap(name + "k_rope", k)
            k_written = self._write_cache(self.k_cache[i], start, k, self.kv_fault)
            v_written = self._write_cache(self.v_cache[i], start, v, False)
            cap(name + "k_cache_write", k_written)
            cap(name + "v_cache_write", v_written)
            keys = self.k_cache[i][:end]
            values = self.v_cache[i][:end]
            cap(name + "k_cache_read", keys)
            cap(name + "v_cache_read", values)
            # [heads, T, end] scores; kv head j serves query heads j*group..j*group+group-1.
            kh = keys.transpose(0, 1).repeat_interleave(group, dim=0)
            vh = values.transpose(0, 1).repeat_interleave(group, dim=0)
            scores = (q.transpose(0, 1) @ kh.transpose(1, 2)) * self.scaling
            scores = scores + mask.to(scores.dtype)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            a = (probs @ vh).transpose(0, 1).reshape(T, self.heads * self.head_dim)
            cap(name + "attn", a)
            o = a @ lw["o"].T
            cap(name + "o_proj", o)
            h = h + o
            cap(name + "residual_attn", h)
            x = rms_norm(h, lw["post_norm"], self.eps)
            cap(name + "post_norm", x)
            gate = x @ lw["gate"].T
            cap(name + "mlp_gate", gate)
            up = x @ lw["up"].T
            cap(name + "mlp_up", up)
            act = torch.nn.functional.silu(gate) * up
            cap(name + "mlp_act", act)
            down = act @ lw["down"].T
            cap(name + "mlp_down", down)
            h = h + down
            cap(name + "residual_mlp", h)
            if not eager:
                p.capture_graph(name + "residual_mlp", h)
        x = rms_norm(h, self.final_norm, self.eps)
        cap("final_norm", x)
        logits = x @ self.lm_head.T
        cap("logits", logits)
        return logits


class Runner:
    """Serves one request: prefill (whole or chunked), then greedy decode.

    Every forward call is one call of the request's label: arm() before it,
    finish() after its logits, with runner.input_ids / runner.logits captured
    outside the model (outside the graph region in graph mode).
    """

    def __init__(self, model, probe=None, label="req-0", weights="", decode_mode="eager"):
        self.model = model
        self.probe = probe
        self.label = label
        self.weights = weights
        self.decode_mode = decode_mode
        self.calls = []  # (phase, start, end) of every forward call, in order

    def _call(self, all_ids, start, end, phase, mode):
        p = self.probe
        ids = torch.tensor(all_ids[start:end], dtype=torch.long)
        if p is not None:
            p.arm(
                self.label,
                token_ids=list(all_ids[:end]),
                positions=[start, end],
                phase=phase,
                sampling={"temperature": 0.0, "greedy": True},
                weights=self.weights,
                dtype=str(self.model.dtype).replace("torch.", ""),
                world_size=1,
            )
            p.capture("runner.input_ids", ids)
        logits = self.model.forward(ids, start, mode=mode)
        if p is not None:
            p.capture("runner.logits", logits)
            p.finish()
        self.calls.append((phase, start, end))
        return logits

    def generate(self, prompt, new_tokens=3, chunks=None):
        """Greedy continuation of ``prompt``; chunks: prefill chunk sizes (None: whole)."""
        ids = list(prompt)
        sizes = list(chunks) if chunks else [len(ids)]
        if sum(sizes) != len(ids):
            raise ValueError("chunk sizes %r do not cover %d prompt tokens" % (sizes, len(ids)))
        start = 0
        for n in sizes:
            logits = self._call(ids, start, start + n, "prefill", "eager")
            start += n
        for _ in range(new_tokens):
            ids.append(int(torch.argmax(logits[-1].float())))
            logits = self._call(ids, len(ids) - 1, len(ids), "decode", self.decode_mode)
        return ids


def check_against_hf(hf=None, ids=PROMPT_IDS):
    """Max |logits(TinyLlama) - logits(HF)| for a float32 prefill of ``ids``."""
    hf = hf or build_hf_model()
    with torch.no_grad():
        ref = hf(torch.tensor([ids], dtype=torch.long)).logits[0].float()
        ours = TinyLlama(hf).forward(torch.tensor(ids, dtype=torch.long), 0).float()
    return float((ours - ref).abs().max()), float(ref.abs().max())
