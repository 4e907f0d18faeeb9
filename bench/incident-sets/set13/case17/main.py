from train import train

if __name__ == "__main__":
    ckpt = train()
    print("saved epoch", ckpt["epoch"])
