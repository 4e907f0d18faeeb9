import torch
from torch import nn


class PosEmbMLPSwin2D(nn.Module):
    def __init__(self, window_size, num_heads, hidden=64):
        super().__init__()
        self.window_size = window_size
        self.num_heads = num_heads
        self.cpb_mlp = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, num_heads, bias=False))
        coords = torch.stack(torch.meshgrid(torch.arange(window_size), torch.arange(window_size), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).float() / max(window_size - 1, 1)
        self.register_buffer("relative_coords", rel, persistent=False)
        self.deploy = False

    def forward(self, attn):
        if self.deploy:
            return attn + self.relative_bias
        bias = 16 * torch.sigmoid(self.cpb_mlp(self.relative_coords)).permute(2, 0, 1)
        self.relative_bias = bias.unsqueeze(0)  # BREAKS
        return attn + self.relative_bias


class WindowAttention(nn.Module):
    def __init__(self, dim, num_heads, window_size):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.pos_emb = PosEmbMLPSwin2D(window_size, num_heads)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        attn = self.pos_emb((q * self.scale) @ k.transpose(-2, -1)).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class FasterViTTiny(nn.Module):
    def __init__(self, num_classes=10, dim=32, window_size=4, patch=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.norm = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads=4, window_size=window_size)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = x + self.attn(self.norm(x))
        return self.head(x.mean(1))
