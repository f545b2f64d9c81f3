// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "./ERC20.sol";

/// @title TestUSDG
/// @notice The USDG stand-in for testnet and development: an ERC-20 with 6 decimals that
/// minters can print freely. The owner grants and revokes the minter role (the service's
/// faucet wallet is a minter); the owner starts as a minter itself.
contract TestUSDG is ERC20 {
    address public owner;
    mapping(address account => bool) public isMinter;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event MinterSet(address indexed account, bool enabled);

    error NotOwner(address caller);
    error NotMinter(address caller);
    error ZeroAddress();

    constructor(address owner_) ERC20("USDG (test)", "USDG") {
        if (owner_ == address(0)) revert ZeroAddress();
        owner = owner_;
        isMinter[owner_] = true;
        emit OwnershipTransferred(address(0), owner_);
        emit MinterSet(owner_, true);
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external {
        if (!isMinter[msg.sender]) revert NotMinter(msg.sender);
        _mint(to, amount);
    }

    function setMinter(address account, bool enabled) external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        if (account == address(0)) revert ZeroAddress();
        isMinter[account] = enabled;
        emit MinterSet(account, enabled);
    }

    function transferOwnership(address newOwner) external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }
}
