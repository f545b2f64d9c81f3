// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "./ERC20.sol";

/// @title WrappedEther
/// @notice WETH9-style wrapper: ether in through `deposit` (or a plain transfer), out through
/// `withdraw`, 1:1, 18 decimals. ConfidentialToken only handles ERC-20 assets, so confidential
/// ETH is a ConfidentialToken over this wrapper.
contract WrappedEther is ERC20 {
    event Deposit(address indexed account, uint256 amount);
    event Withdrawal(address indexed account, uint256 amount);

    error EtherTransferFailed(address to, uint256 amount);

    constructor() ERC20("Wrapped Ether", "WETH") {}

    function decimals() public pure override returns (uint8) {
        return 18;
    }

    receive() external payable {
        deposit();
    }

    function deposit() public payable {
        _mint(msg.sender, msg.value);
        emit Deposit(msg.sender, msg.value);
    }

    function withdraw(uint256 amount) external {
        _burn(msg.sender, amount);
        emit Withdrawal(msg.sender, amount);
        (bool sent,) = msg.sender.call{value: amount}("");
        if (!sent) revert EtherTransferFailed(msg.sender, amount);
    }
}
