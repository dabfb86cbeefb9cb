"""A student's own multi-head attention layer, as chapter 2 asks for it: the projections, named as in tfm_ref.

Tests subclass it with a forward written one way or another (from scratch, or on chapter 2's given helpers).
"""
import torch


class StudentAttentionLayer(torch.nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, dropout=0.0):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.dropout = n_heads, n_kv_heads or n_heads, dropout
        head_dim = d_model // n_heads
        self.q_proj = torch.nn.Linear(d_model, n_heads * head_dim, bias=bias)
        self.k_proj = torch.nn.Linear(d_model, self.n_kv_heads * head_dim, bias=bias)
        self.v_proj = torch.nn.Linear(d_model, self.n_kv_heads * head_dim, bias=bias)
        self.out_proj = torch.nn.Linear(n_heads * head_dim, d_model, bias=bias)
